"""Stage 1-2: ClaimReview sources, cleaning and merging into reviews, and the publisher filter."""

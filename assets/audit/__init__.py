"""The human audit of a release: a secret stratified sample of its claims, Label Studio tasks people judge blind, their
annotations read back, and how far people agree with the labels, published as an addendum beside the release."""

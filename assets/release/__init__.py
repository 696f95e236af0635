"""The balanced, versioned quarterly release."""

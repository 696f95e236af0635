"""The jobs the release feeds: the verifier and its evaluation."""

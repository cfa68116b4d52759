"""The scratch pane and its prune dialog."""

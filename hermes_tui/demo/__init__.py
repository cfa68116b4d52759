"""The demo home's builders (board, processes, scratch) and the screenshot script."""

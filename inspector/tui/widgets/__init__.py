"""The panes of the main screen: chunk list, field tree, hex view, header, key bar and job bar."""

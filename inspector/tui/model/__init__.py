"""The inspector's data, no widgets: the open document and its edits, rows, jobs and the child process for big files."""

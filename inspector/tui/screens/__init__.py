"""The modal screens several features open: a prompt, the quit and save questions, help, the check results."""

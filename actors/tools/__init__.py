"""The command-line tools: the `groupcoord` command, offset-reset planning and the demo."""

"""``veritas`` subcommands beyond run/yields/export/demo, one module each (see ``cli.command_modules``)."""

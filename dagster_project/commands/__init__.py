"""``veritas`` subcommands, one module each (see ``cli.command_modules``)."""

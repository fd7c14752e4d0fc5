"""The command line: one module per command group; main builds the parser and imports a command's module only when it runs, so --help and listings start fast."""

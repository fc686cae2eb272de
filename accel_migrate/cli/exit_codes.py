"""The exit codes every command shares (black's: 1 would change, 123 failed)."""

EXIT_OK = 0
EXIT_WOULD_CHANGE = 1
EXIT_USAGE = 2
EXIT_FAILED = 123

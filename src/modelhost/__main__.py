"""`python -m modelhost`: the `modelhost` command, as the console script runs it."""

from modelhost.cli import main

if __name__ == "__main__":
    main()

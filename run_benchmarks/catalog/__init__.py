"""What a user can name and the files that declare it: case names, cases, vendors and their hardware kinds, framework launchers, layered configs, references and measured peaks."""

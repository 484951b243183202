"""Pure generators: model values in, file contents and dicts out. No pulumi here."""

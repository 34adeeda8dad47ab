"""What is under test: a model spec (a registered name, a .pte, a library model), the
registry of models, the export recipes and the exported program with its inputs."""

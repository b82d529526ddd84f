"""What the machine has and where a model should run."""

"""Native and emulated proof that the instruction models are the instructions (`lowp isa verify`): imported by tests and the CLI only."""

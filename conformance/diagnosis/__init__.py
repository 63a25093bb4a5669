"""How a wrong result is named: the accumulation variant families and the output-stage families."""

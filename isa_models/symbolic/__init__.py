"""The bit-vector backend of the instruction models (`lowp prove`) and the evaluation of its terms on numpy arrays."""

"""What is tried: cases, quantized parameters, problems, and the validation of a kernel entry."""

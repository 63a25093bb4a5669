"""lowp.kernels"""

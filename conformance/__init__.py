"""lowp.conformance"""

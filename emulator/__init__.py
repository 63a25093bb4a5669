"""lowp.emulator"""

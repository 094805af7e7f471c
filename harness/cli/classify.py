"""(command module: filled in by its owner)"""

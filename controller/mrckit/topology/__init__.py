"""mrckit.topology"""

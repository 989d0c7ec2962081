"""mrckit.switch"""

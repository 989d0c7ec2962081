"""mrckit.proto"""

"""mrckit.control"""

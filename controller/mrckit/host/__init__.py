"""mrckit.host"""

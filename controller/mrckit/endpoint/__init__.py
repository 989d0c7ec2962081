"""mrckit.endpoint"""

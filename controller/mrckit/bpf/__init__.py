"""mrckit.bpf"""

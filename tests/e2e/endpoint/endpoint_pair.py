"""Addresses of the endpoint tests' netns pair (a uniquely named module, so that test files can
import it without clashing with other folders' conftest modules)."""

ADDR_A = "2001:db8:100:1::1"
ADDR_B = "2001:db8:100:1::2"
LINK_MTU = 3500
"""Fits a 2048 B payload with every header (design 3.1), under the 3506 B XDP limit."""

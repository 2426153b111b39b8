"""placeholder"""
def render_imhex(host_order: str = "little") -> str:
    return ""

"""placeholder"""
def render_field_tables() -> str:
    return ""

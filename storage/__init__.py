"""groupcoord.storage"""

"""groupcoord.actors"""

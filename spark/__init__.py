"""groupcoord.spark"""

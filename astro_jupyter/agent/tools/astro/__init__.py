"""Astronomy tools: targets (Sesame), papers (ADS/arXiv), parsing, RAG, notes."""

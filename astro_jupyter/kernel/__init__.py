"""The IPython side: ``%astro`` magics, the kernel runtime, rich results and live timelines."""

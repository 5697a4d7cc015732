"""What SGLang and the router in front of it accept, as both sides need to know it: settings,
sampling, routers, length limits, the served model, worker aborts, errors and HTTP plumbing.
The transport that sends episodes' requests is the episode side's.
"""

"""Who may use the proxy and with which key upstream (keys), and which strategy parameters a request may set
(parameters).
"""

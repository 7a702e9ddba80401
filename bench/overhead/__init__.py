"""What the proxy costs on the wire: `python -m bench.overhead` (bench/overhead/cli.py) runs nginx with canned
answers (nginx.py), this proxy and its peers in front of it (proxies.py), loads each with hey and times a
stream's first event (load.py), and writes the tables (report.py) and charts (charts.py).
"""

"""What the notes strategy gets from the app: the notes store with single flight over the general cache, the
summariser calls, and the background folds made ahead of need.
"""

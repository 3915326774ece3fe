"""Facts about AWS that the package ships as data and a team may override: the on-demand price table and its
refresh from the AWS Price List API (prices, price_list), and the instance catalogue (instance_catalogue).

Imports nothing itself, so a module of it loads only what it needs (DAG files parse often)."""

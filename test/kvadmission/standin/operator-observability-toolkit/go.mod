module github.com/rhobs/operator-observability-toolkit

go 1.26

require github.com/prometheus/client_golang v1.22.0

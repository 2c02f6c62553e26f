#!/usr/bin/env bash
# Healthy when IMAPS answers with a greeting through the published port.
line=$(timeout 4 openssl s_client -quiet -connect 127.0.0.1:993 </dev/null 2>/dev/null | head -n1)
case "$line" in *"OK"*) exit 0 ;; *) exit 1 ;; esac

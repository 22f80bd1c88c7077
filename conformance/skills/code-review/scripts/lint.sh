#!/bin/sh
# Style findings for the files named; a stand-in the skill's instructions point at.
exec grep -n '[[:space:]]$' "$@"

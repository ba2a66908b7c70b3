"""The p4lite-switch process: command line, packet I/O on AF_PACKET ports and pcap files."""

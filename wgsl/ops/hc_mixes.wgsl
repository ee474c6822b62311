// mHC mixes: not registered yet (record_hc_mixes has no kernel behind it until this file holds one).

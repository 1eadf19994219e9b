{-# LANGUAGE ScopedTypeVariables #-}
{-# LANGUAGE OverloadedStrings #-}
-- | A stand-in for the cumulo core: a real listening Unix socket whose one
-- connection is driven by a script, in its own thread, while the test uses
-- the SDK against it.
module FakeCore (Conn, withFakeCore, recvMsg, sendMsg, handshake, welcome, closedByPeer) where

import Control.Concurrent (forkIO)
import Control.Concurrent.MVar
import Control.Exception
import qualified Data.ByteString as B
import Data.IORef
import qualified Network.Socket as N
import qualified Network.Socket.ByteString as NB
import System.Directory (getTemporaryDirectory, removeDirectoryRecursive, createDirectory)
import System.FilePath ((</>))
import System.Timeout (timeout)

import Cumulo.Codec

data Conn = Conn N.Socket (IORef B.ByteString)

welcome :: Welcome
welcome = Welcome
  { welcomeVersion = 1, welcomeNodeId = 1, welcomeInstanceId = 7, welcomeProcessIndex = 0
  , welcomeProcessCount = 1, welcomeThreadCount = 1, welcomeWindow = 1, welcomeMaxFrame = 1024 * 1024
  , welcomeTimeoutAsync = 5000, welcomeTimeoutSync = 5000, welcomeTimeoutTerminate = 2000
  , welcomePriorityDefault = 0, welcomeKeepalive = 5000, welcomePrefix = "/tests/" }

-- | Run @script@ as the core of one connection and @client@ with the socket
-- path; rethrows a failure of either (the script's assertions included).
withFakeCore :: (Conn -> IO a) -> (FilePath -> IO b) -> IO (a, b)
withFakeCore script client = do
  tmp <- getTemporaryDirectory
  dir <- uniqueDir tmp (0 :: Int)
  let path = dir </> "core.sock"
  listener <- N.socket N.AF_UNIX N.Stream N.defaultProtocol
  N.bind listener (N.SockAddrUnix path)
  N.listen listener 1
  done <- newEmptyMVar
  _ <- forkIO $ do
    r <- try $ bracket (fst <$> N.accept listener) N.close $ \s -> do
      buf <- newIORef B.empty
      script (Conn s buf)
    putMVar done r
  b <- client path `onException` (N.close listener >> removeDirectoryRecursive dir)
  r <- timeout 10000000 (takeMVar done)
  N.close listener
  removeDirectoryRecursive dir
  case r of
    Nothing -> error "the fake core's script did not finish in 10 s"
    Just (Left (e :: SomeException)) -> throwIO e
    Just (Right a) -> pure (a, b)
  where
    uniqueDir tmp i = do
      let d = tmp </> ("cumulo-hs-test-" ++ show i)
      r <- try (createDirectory d)
      case r of
        Right () -> pure d
        Left (_ :: IOException) -> uniqueDir tmp (i + 1)

-- | The next frame from the instance (within 5 s).
recvMsg :: Conn -> IO Message
recvMsg (Conn s ref) = do
  r <- timeout 5000000 loop
  maybe (error "no frame from the instance in 5 s") pure r
  where
    loop = do
      buf <- readIORef ref
      case decodeFrame maxBound buf of
        Left e -> throwIO e
        Right (Just (m, rest)) -> writeIORef ref rest >> pure m
        Right Nothing -> do
          chunk <- NB.recv s 65536
          if B.null chunk then error "the instance closed the connection" else writeIORef ref (buf <> chunk) >> loop

sendMsg :: Conn -> [Message] -> IO ()
sendMsg (Conn s _) = NB.sendAll s . B.concat . map encode

-- | Expect HELLO, answer WELCOME; the HELLO.
handshake :: Conn -> IO Hello
handshake conn = do
  m <- recvMsg conn
  case m of
    MHello h -> sendMsg conn [MWelcome welcome] >> pure h
    other -> error ("expected HELLO, got " ++ show other)

-- | True once the instance has closed its end (reading what is left).
closedByPeer :: Conn -> IO Bool
closedByPeer (Conn s _) = do
  r <- timeout 5000000 drain
  pure (r == Just True)
  where drain = NB.recv s 65536 >>= \c -> if B.null c then pure True else drain
